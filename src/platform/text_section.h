// platform/text_section.h — where roost's code lies in the library.
//
// Owns: ROOST_COMMON_TEXT, the mark on the code that nearly every program
// runs: the entry points, refills and slab turnover, the backend's chunk
// paths, start-up, thread start and exit, and the service thread's loop.
// The mark puts a function in .text.hot.roost, a section the GNU linker
// places with the other .text.hot ones near the front of .text, so the
// marked code lies together.  The kernel maps a library's file pages in
// 64 KiB windows around each fault: code spread over the library makes a
// small program keep all of it resident, while the gathered code fits the
// first window.  The test layout.common_text names any function a small
// program runs outside the section.
// Must never: include anything, or mark inline code (it is placed with
// each caller) or a template (its instantiations take no section).
#pragma once

#define ROOST_COMMON_TEXT __attribute__((section(".text.hot.roost")))
