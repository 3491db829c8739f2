# cmake/embed_text.cmake — a text file as a C++ string constant, at build
# time: cmake -DIN=file -DOUT=header -DNAME=identifier -P embed_text.cmake.
#
# Owns: the generated header (a raw string literal).  Must never: change the
# text (the header holds it byte for byte), or accept a text that holds the
# literal's closing delimiter (it stops with an error instead).
file(READ "${IN}" text)
string(FIND "${text}" ")roost_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the delimiter )roost_embed\"")
endif()
file(WRITE "${OUT}" "// Generated from ${IN} by cmake/embed_text.cmake: do not edit.\n#pragma once\ninline constexpr char ${NAME}[] = R\"roost_embed(${text})roost_embed\";\n")
