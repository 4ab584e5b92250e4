# Shared build settings of Kiln's N-API addons. Include this file, then call
#   kiln_napi_addon(<target> <sources...>)
# to get a `<target>.node` shared library built with node-addon-api, C++ exceptions mapped
# through include/kiln/napi/errors.h, Node-API version 8, unthrowable exceptions swallowed
# (see below) and hidden symbols (so two addons in one process never share inline statics).

if(NOT CMAKE_JS_VERSION)
  message(FATAL_ERROR "Kiln addons are built with cmake-js (npm run build in the addon package)")
endif()

set(KILN_NAPI_COMMON_DIR "${CMAKE_CURRENT_LIST_DIR}")

# node-addon-api's headers: cmake-js provides Node-API's C headers, not the C++ wrapper.
execute_process(
  COMMAND node -p "require('path').dirname(require.resolve('node-addon-api/package.json'))"
  WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}"
  OUTPUT_VARIABLE KILN_NODE_ADDON_API_DIR
  OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE KILN_NODE_ADDON_API_RESULT)
if(NOT KILN_NODE_ADDON_API_RESULT EQUAL 0 OR NOT EXISTS "${KILN_NODE_ADDON_API_DIR}/napi.h")
  message(FATAL_ERROR "node-addon-api is not installed (run npm install)")
endif()

function(kiln_napi_addon target)
  add_library(${target} SHARED ${ARGN} ${CMAKE_JS_SRC})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    SUFFIX ".node"
    CXX_STANDARD 17
    CXX_STANDARD_REQUIRED ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${target} PRIVATE
    ${CMAKE_JS_INC}
    "${KILN_NODE_ADDON_API_DIR}"
    "${KILN_NAPI_COMMON_DIR}/include")
  # NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS: a worker thread terminated while an async
  # operation runs completes it in an environment that can no longer run JavaScript; settling
  # its promise then fails and must be dropped rather than abort the process.
  target_compile_definitions(${target} PRIVATE
    NAPI_VERSION=8
    NAPI_CPP_EXCEPTIONS
    NODE_ADDON_API_DISABLE_DEPRECATED
    NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS)
  target_link_libraries(${target} PRIVATE ${CMAKE_JS_LIB})
  if(MSVC AND CMAKE_JS_NODELIB_DEF AND CMAKE_JS_NODELIB_TARGET)
    execute_process(COMMAND ${CMAKE_AR} /def:${CMAKE_JS_NODELIB_DEF}
                    /out:${CMAKE_JS_NODELIB_TARGET} ${CMAKE_STATIC_LINKER_FLAGS})
  endif()
endfunction()
