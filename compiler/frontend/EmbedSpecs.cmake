# cmake -DSPECS=<a.yaml|b.yaml|...> -DOUTPUT=<file.cpp> -P EmbedSpecs.cmake
# Writes a C++ file that holds each arch spec as a byte array (see EmbeddedSpecs.h). Bytes rather than a raw
# string literal so that no spec text can break the generated code. The list is '|'-separated because a ';'
# list does not survive add_custom_command as one argument.
string(REPLACE "|" ";" spec_files "${SPECS}")
set(arrays "")
set(entries "")
set(index 0)
foreach(spec IN LISTS spec_files)
  get_filename_component(name "${spec}" NAME)
  file(READ "${spec}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  # 16 bytes a line.
  set(bytes "")
  set(offset 0)
  while(offset LESS hex_length)
    string(SUBSTRING "${hex}" ${offset} 32 chunk)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," chunk "${chunk}")
    string(APPEND bytes "    ${chunk}\n")
    math(EXPR offset "${offset} + 32")
  endwhile()
  string(APPEND arrays "// ${name}\nconst unsigned char kSpec${index}[] = {\n${bytes}    0x00};\n\n")
  string(APPEND entries "    {\"${name}\", reinterpret_cast<const char *>(kSpec${index}), ${size}},\n")
  math(EXPR index "${index} + 1")
endforeach()

file(WRITE "${OUTPUT}.tmp"
  "// Generated from arch-specs/*.yaml by compiler/frontend/EmbedSpecs.cmake: do not edit.\n"
  "#include \"compiler/frontend/EmbeddedSpecs.h\"\n\n"
  "namespace gerbil::embedded_specs {\n\n"
  "namespace {\n\n${arrays}} // namespace\n\n"
  "const File kFiles[] = {\n${entries}    {nullptr, nullptr, 0}};\n"
  "const size_t kFileCount = ${index};\n\n"
  "} // namespace gerbil::embedded_specs\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
