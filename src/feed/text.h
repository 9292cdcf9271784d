/* text.h — feed text to clean plain text.
 *
 * Feeds put HTML (escaped or in CDATA), entities of every kind and broken encodings into
 * title, summary and content. nf_text_from_html() produces what the articles topic carries:
 * tags removed (contents of script, style and similar dropped; block elements and <br> become
 * a space), character references decoded (all HTML named references that news text uses,
 * including the legacy ones without ';' such as "&amp" and "&nbsp", and decimal/hex ones;
 * invalid code points become U+FFFD), whitespace (including NBSP) collapsed to one space and
 * trimmed, invalid UTF-8 repaired to U+FFFD, output cut to at most max-1 bytes on a code point
 * boundary and NUL-terminated. nf_text_plain() does the same for text that is not HTML (no tag
 * removal, entities still decoded). No allocation.
 *
 * Details a caller may notice: a legacy reference without ';' is decoded only when no letter,
 * digit or '=' follows ("&copy 2024" is decoded, "?a=1&copy=2" is left alone); an unknown one
 * stays literal; &#128;..&#159; are read as windows-1252, as browsers do. A tag cut off at the
 * end of the input is dropped, "a < b" is text. Control characters (other than whitespace)
 * and U+FEFF are dropped. Text decoded from a reference is never parsed as markup, so the
 * output is not always a fixed point: "&amp;lt;" gives "&lt;". Thread-safe, no global state. */
#ifndef NF_TEXT_H
#define NF_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Returns the output length (excluding the NUL). out must have room for max bytes (max >= 1). */
size_t nf_text_from_html(const char *in, size_t len, char *out, size_t max);
size_t nf_text_plain(const char *in, size_t len, char *out, size_t max);

/* Copies in to out replacing invalid UTF-8 with U+FFFD (and dropping NULs); cut like above. */
size_t nf_utf8_sanitize(const char *in, size_t len, char *out, size_t max);
bool nf_utf8_valid(const char *in, size_t len);

#endif
