/* Test plugin: says it speaks plugin ABI version 3; kvconf (versions 1 and 2) must refuse it before calling register.
 */
#include <stdlib.h>

#include "kvconf/plugin.h"

KVCONF_PLUGIN_EXPORT uint32_t kvconf_plugin_abi_version(void) { return 3u; }

KVCONF_PLUGIN_EXPORT int kvconf_plugin_register(const struct kvconf_host* host, struct kvconf_plugin* out, char* err,
                                                size_t err_size) {
  (void)host, (void)out, (void)err, (void)err_size;
  abort(); /* never called: the version check comes first */
}
