/* Test plugin: exports kvconf_plugin_abi_version but not kvconf_plugin_register; kvconf must refuse it. */
#include "kvconf/plugin.h"

KVCONF_PLUGIN_EXPORT uint32_t kvconf_plugin_abi_version(void) { return KVCONF_PLUGIN_ABI_VERSION; }
