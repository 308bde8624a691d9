# Writes the sample report and parses every junit.xml with python3's xml.dom.minidom (a full XML parser: any
# unescaped character or unclosed element fails), counting <testcase> elements against the <testsuites tests=…>.
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${SAMPLE} ${OUT} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kvconf_report_sample failed (${rc}): ${err}")
endif()
file(GLOB_RECURSE junits ${OUT}/junit.xml)
list(LENGTH junits n)
if(NOT n EQUAL 5)
  message(FATAL_ERROR "expected 5 junit.xml (top level + 4 model×profile sub-reports), found ${n}: ${junits}")
endif()
foreach(j ${junits})
  execute_process(COMMAND ${PYTHON} -c
    "import sys, xml.dom.minidom as m\nd = m.parse(sys.argv[1])\nroot = d.documentElement\nn = len(d.getElementsByTagName('testcase'))\nassert root.tagName == 'testsuites', root.tagName\nassert n == int(root.getAttribute('tests')) and n > 0, (n, root.getAttribute('tests'))\nprint(sys.argv[1], n, 'testcases')"
    ${j} RESULT_VARIABLE prc OUTPUT_VARIABLE pout ERROR_VARIABLE perr)
  if(NOT prc EQUAL 0)
    message(FATAL_ERROR "${j} does not parse as the expected XML: ${perr}")
  endif()
  message(STATUS "${pout}")
endforeach()
