# `kvconf --version` prints the version; `kvconf --help` lists the run subcommand.
execute_process(COMMAND "${KVCONF}" --version RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^kvconf [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "--version: rc=${rc} out='${out}'")
endif()
execute_process(COMMAND "${KVCONF}" --help RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "run")
  message(FATAL_ERROR "--help: rc=${rc} out='${out}'")
endif()
