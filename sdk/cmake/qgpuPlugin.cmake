# qgpu_add_plugin(<name> SOURCES <src>... [LINK <target>...] [OUTPUT_DIR <dir>] [NO_INSTALL])
#
# Builds a qgpu plugin: a shared library named qgpu_<name> (no "lib" prefix),
# with hidden visibility (only the descriptor entry is exported), linked
# against the SDK. Used in-tree and by out-of-tree plugins through
# find_package(qgpuSDK).
function(qgpu_add_plugin name)
  cmake_parse_arguments(ARG "NO_INSTALL" "OUTPUT_DIR" "SOURCES;LINK" ${ARGN})
  set(target qgpu_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME qgpu_${name}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(TARGET qgpu::sdk)
    target_link_libraries(${target} PRIVATE qgpu::sdk ${ARG_LINK})
  else()
    target_link_libraries(${target} PRIVATE qgpu_sdk ${ARG_LINK})
  endif()
  # Refuse unresolved symbols at link time rather than at load time.
  if(NOT APPLE)
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  if(ARG_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  elseif(DEFINED QGPU_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${QGPU_PLUGIN_OUTPUT_DIR})
  endif()
  if(NOT ARG_NO_INSTALL AND DEFINED QGPU_PLUGIN_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${QGPU_PLUGIN_INSTALL_DIR})
  endif()
endfunction()
