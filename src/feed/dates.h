/* dates.h — the dates feeds really contain, to Unix epoch milliseconds (UTC).
 *
 * Accepted: RFC 822 / 1123 / 2822 ("Sat, 07 Sep 2002 00:00:01 GMT") with named zones (UT, GMT,
 * Z, US zones, military letters, common ones such as CET/CEST/BST/JST/AEST) and numeric ones
 * (+0200, +02:00, -05), missing seconds, two-digit years, a missing, misspelt or wrong day
 * name, full or abbreviated month names in any case, extra spaces and commas; RFC 3339 /
 * ISO 8601 / W3C-DTF ("2002-09-07T00:00:01Z", "...+02:00", space instead of T, fractional
 * seconds, "+0200", date only, year-month, year). A date without zone is taken as UTC.
 * Out-of-range fields (month 13, Feb 30, hour 25) are rejected, not wrapped. Military letters
 * follow RFC 1123 (A = +01:00; RFC 822 had the signs reversed); an unknown all-capitals zone
 * word of 3..5 letters counts as UTC (RFC 2822 §4.3). All-numeric day/month orders
 * ("06/10/2003") are refused: US and European readings differ.
 * No allocation; thread-safe; independent of the C library's locale and TZ. */
#ifndef NF_DATES_H
#define NF_DATES_H

#include <stddef.h>
#include <stdint.h>

/* 0 and *out_ms on success; -1 if s (len bytes, need not be NUL-terminated) is not a date. */
int nf_date_parse(const char *s, size_t len, int64_t *out_ms);

/* RFC 3339 UTC: "2002-09-07T00:00:01Z", with ".123" before Z when ms % 1000 != 0.
 * Writes at most buflen bytes including the NUL (32 is always enough); returns the length of
 * the whole string, like snprintf (>= buflen means it was cut). Years outside 0..9999 are
 * written with a sign and all their digits. */
size_t nf_date_format(int64_t ms, char *buf, size_t buflen);

#endif
