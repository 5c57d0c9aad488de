# cmake -DOUT=blobs.h "-DINPUTS=a.fatbin;b.cubin" -P bin2c.cmake: each input as a C array in
# .rodata (what bin2c or `xxd -i` write), and a table of them by file name.
set(body "")
set(table "")
foreach(input IN LISTS INPUTS)
  get_filename_component(name "${input}" NAME)
  string(MAKE_C_IDENTIFIER "blob_${name}" id)
  file(READ "${input}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const unsigned char ${id}[] __attribute__((aligned(8))) = {${bytes}};\n")
  string(APPEND table "    {\"${name}\", ${id}, sizeof ${id}}, \\\n")
endforeach()
file(WRITE "${OUT}" "${body}#define EMBEDFAT_ARRAYS \\\n${table}\n")
