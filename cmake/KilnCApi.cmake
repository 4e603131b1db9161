# kiln_add_c_api(NAME SOURCES... LINK library HEADER file.h): one of Kiln's C APIs, a
# shared library exporting only its C functions (hidden visibility; the static Kiln
# libraries inside stay hidden with --exclude-libs, so their C++ symbols cannot clash
# with the host's), its header public, SOVERSION 1 (the header's API major version).
function(kiln_add_c_api name)
  cmake_parse_arguments(PARSE_ARGV 1 api "" "HEADER" "SOURCES;LINK")
  add_library(${name} SHARED ${api_SOURCES})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(${name} PRIVATE ${api_LINK})
  target_link_options(${name} PRIVATE -Wl,--exclude-libs,ALL ${KILN_NO_UNDEFINED})
  set_target_properties(${name} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    VERSION ${PROJECT_VERSION}
    SOVERSION 1
    PUBLIC_HEADER ${CMAKE_CURRENT_SOURCE_DIR}/include/${api_HEADER})
endfunction()
