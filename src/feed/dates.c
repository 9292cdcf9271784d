/* dates.c — the dates feeds really contain, to epoch milliseconds (see dates.h).
 *
 * Hand-written rather than strptime()/timegm(): those depend on the C library's locale (month
 * names) and TZ, are not all thread-safe, and accept or wrap things we must reject (month 13,
 * Feb 30). There are two grammars. ISO 8601 / RFC 3339 is strict and positional: it is what
 * generators emit, so a deviation is more likely garbage than a dialect. RFC 822 and its
 * descendants are hand-typed or produced by ad-hoc code, so that side is a token scanner:
 * words are a day name (skipped, however spelt), a month or a zone; numbers are day or year by
 * order and width; "h:mm[:ss]" is the time; a sign after the time starts a numeric zone. That
 * one loop covers RFC 1123, RFC 850 ("Sunday, 06-Nov-94"), asctime ("Tue Jun 10 04:00:00 2003")
 * and date(1) ("... 04:00:00 EDT 2003") without a case for each. Numeric day/month orders
 * ("06/10/2003") are refused: US and European readings differ and a wrong date is worse than
 * the fetch-time fallback; a four-digit year first ("2006/09/15 08:19:53", common in feeds
 * made in East Asia) is unambiguous and read.
 *
 * Zones: a date without one is UTC. Military letters follow RFC 1123 §5.2.14 (A = +01:00, N =
 * -01:00), which corrects RFC 822's reversed signs. An unknown all-capitals word of 3..5
 * letters in zone position is taken as UTC (RFC 2822 §4.3 says to treat unknown zones as
 * -0000), so one exotic abbreviation costs hours, not the date.
 *
 * Calendar arithmetic is Howard Hinnant's days_from_civil / civil_from_days (proleptic
 * Gregorian, exact for every year here), so nothing depends on time_t's range either. */
#include "feed/dates.h"

#include <stdbool.h>
#include <string.h>

#define MS_PER_DAY 86400000LL

/* ---- calendar --------------------------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int y)
{
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

static unsigned days_in_month(int y, int m)
{
    static const unsigned char dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* The parse result before it becomes a number; -1 marks a field not seen. */
typedef struct {
    int year, mon, day, hour, min, sec, ms;
    int off;       /* zone offset in minutes east of UTC */
    bool has_zone; /* off is meaningful */
} fields_t;

static int to_ms(const fields_t *f, int64_t *out_ms)
{
    if (f->year < 1 || f->year > 9999 || f->mon < 1 || f->mon > 12 || f->day < 1 ||
        (unsigned)f->day > days_in_month(f->year, f->mon))
        return -1;
    /* A leap second (:60) is valid RFC 3339; it lands on the next second, as in timegm(). */
    if (f->hour < 0 || f->hour > 23 || f->min < 0 || f->min > 59 || f->sec < 0 || f->sec > 60)
        return -1;
    int64_t days = days_from_civil(f->year, (unsigned)f->mon, (unsigned)f->day);
    int64_t secs = days * 86400 + f->hour * 3600 + f->min * 60 + f->sec - (int64_t)f->off * 60;
    *out_ms = secs * 1000 + f->ms;
    return 0;
}

/* ---- lexical helpers -------------------------------------------------------------------- */

static inline bool is_digit(unsigned char c)
{
    return (unsigned)(c - '0') < 10;
}

static inline bool is_alpha(unsigned char c)
{
    return (unsigned)((c | 0x20) - 'a') < 26;
}

static inline bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Reads up to max digits at *i; returns the count (0: none) and the value in *v. */
static int digits(const unsigned char *s, size_t len, size_t *i, int max, int *v)
{
    int n = 0, x = 0;
    while (*i < len && n < max && is_digit(s[*i])) {
        x = x * 10 + (s[*i] - '0');
        (*i)++;
        n++;
    }
    *v = x;
    return n;
}

/* Exactly n digits, or -1. */
static int fixed(const unsigned char *s, size_t len, size_t *i, int n)
{
    int v;
    return digits(s, len, i, n, &v) == n ? v : -1;
}

/* ".123" or ",123456" after seconds: milliseconds, further digits truncated. */
static void fraction(const unsigned char *s, size_t len, size_t *i, int *ms)
{
    if (*i + 1 < len && (s[*i] == '.' || s[*i] == ',') && is_digit(s[*i + 1])) {
        (*i)++;
        int scale = 100;
        *ms = 0;
        for (; *i < len && is_digit(s[*i]); (*i)++, scale /= 10)
            *ms += (s[*i] - '0') * scale;
    }
}

/* s[*i] is '+' or '-'. Accepts +hh, +hhmm, +hh:mm, +h and +hmm. */
static bool numeric_zone(const unsigned char *s, size_t len, size_t *i, int *off)
{
    int sign = s[*i] == '-' ? -1 : 1;
    (*i)++;
    int v, h, m = 0;
    int n = digits(s, len, i, 4, &v);
    if (n == 1 || n == 2) {
        h = v;
        if (*i < len && s[*i] == ':') {
            (*i)++;
            if ((m = fixed(s, len, i, 2)) < 0)
                return false;
        }
    } else if (n == 3 || n == 4) {
        h = v / 100;
        m = v % 100;
    } else {
        return false;
    }
    if (h > 23 || m > 59 || (*i < len && is_digit(s[*i])))
        return false;
    *off = sign * (h * 60 + m);
    return true;
}

/* Case-insensitive equality of a word (n letters) with a lower-case literal. */
static bool word_is(const unsigned char *w, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i]; i++)
        if ((w[i] | 0x20) != (unsigned char)lit[i])
            return false;
    return i == n && lit[i] == '\0';
}

/* ---- names ------------------------------------------------------------------------------ */

/* 1..12 for "jan", "january", "sept", any case (a trailing '.' is the caller's); else 0. */
static int month_of(const unsigned char *w, size_t n)
{
    static const char *const names[12] = {"january",   "february", "march",    "april",
                                          "may",       "june",     "july",     "august",
                                          "september", "october",  "november", "december"};
    if (n < 3)
        return 0;
    for (int m = 0; m < 12; m++) {
        const char *name = names[m];
        size_t k = 0;
        while (k < n && name[k] && (w[k] | 0x20) == (unsigned char)name[k])
            k++;
        if (k == n)
            return m + 1;
    }
    return word_is(w, n, "sept") ? 9 : 0;
}

/* "Mon", "Tues", "Thurs", "Wednesday", "Sun.": two letters decide; the rest is not checked,
 * because feeds misspell day names and the date itself says which day it was. */
static bool is_day_name(const unsigned char *w, size_t n)
{
    static const char pairs[7][3] = {"mo", "tu", "we", "th", "fr", "sa", "su"};
    if (n < 2 || n > 9)
        return false;
    for (int k = 0; k < 7; k++)
        if ((w[0] | 0x20) == pairs[k][0] && (w[1] | 0x20) == pairs[k][1])
            return true;
    return false;
}

/* Zone abbreviations that feeds use, minutes east of UTC. Where one is ambiguous the reading
 * most common in English-language news feeds wins (CST = US Central, IST = India, BST = British
 * Summer); the generic US names (AT, ET, CT, MT, PT) are their standard time, as feedparser
 * reads them. Sorted for the binary search; matched case-insensitively. */
static const struct {
    char name[6];
    short off;
} zones[] = {
    {"acdt", 630},  {"acst", 570}, {"adt", -180}, {"aedt", 660}, {"aest", 600}, {"akdt", -480},
    {"akst", -540}, {"art", -180}, {"ast", -240}, {"at", -240},  {"awst", 480}, {"brt", -180},
    {"bst", 60},    {"cat", 120},  {"cdt", -300}, {"cest", 120}, {"cet", 60},   {"cst", -360},
    {"ct", -360},   {"eat", 180},  {"edt", -240}, {"eest", 180}, {"eet", 120},  {"est", -300},
    {"et", -300},   {"gmt", 0},    {"hkt", 480},  {"hst", -600}, {"ict", 420},  {"idt", 180},
    {"ist", 330},   {"jst", 540},  {"kst", 540},  {"mdt", -360}, {"mest", 120}, {"met", 60},
    {"msd", 240},   {"msk", 180},  {"mst", -420}, {"mt", -420},  {"ndt", -150}, {"nst", -210},
    {"nzdt", 780},  {"nzst", 720}, {"pdt", -420}, {"pht", 480},  {"pkt", 300},  {"pst", -480},
    {"pt", -480},   {"sast", 120}, {"sgt", 480},  {"uct", 0},    {"ut", 0},     {"utc", 0},
    {"wat", 60},    {"west", 60},  {"wet", 0},    {"wib", 420},  {"z", 0},
};

/* A zone word: a known abbreviation or a military letter (RFC 1123 signs; J is not a zone).
 * Unknown capitalised 3..5-letter words count as UTC (see the top of the file). */
static bool zone_of(const unsigned char *w, size_t n, int *off)
{
    if (n == 1) {
        int c = w[0] | 0x20;
        if (c == 'z')
            *off = 0;
        else if (c >= 'a' && c <= 'i')
            *off = (c - 'a' + 1) * 60;
        else if (c >= 'k' && c <= 'm')
            *off = (c - 'k' + 10) * 60;
        else if (c >= 'n' && c <= 'y')
            *off = -(c - 'n' + 1) * 60;
        else
            return false;
        return true;
    }
    if (n > 5)
        return false;
    char lw[6];
    for (size_t k = 0; k < n; k++)
        lw[k] = (char)(w[k] | 0x20);
    lw[n] = '\0';
    size_t lo = 0, hi = sizeof zones / sizeof zones[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(zones[mid].name, lw);
        if (c == 0) {
            *off = zones[mid].off;
            return true;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (n < 3)
        return false;
    for (size_t k = 0; k < n; k++)
        if (w[k] < 'A' || w[k] > 'Z')
            return false;
    *off = 0;
    return true;
}

/* ---- ISO 8601 / RFC 3339 / W3C-DTF ------------------------------------------------------ */

/* Zone at the end of an ISO date: Z, a numeric offset or (leniently) a zone name. */
static bool iso_zone(const unsigned char *s, size_t len, size_t *i, fields_t *f)
{
    while (*i < len && is_space(s[*i]))
        (*i)++;
    if (*i == len)
        return true;
    if (s[*i] == '+' || s[*i] == '-') {
        f->has_zone = true;
        return numeric_zone(s, len, i, &f->off);
    }
    size_t w = *i;
    while (*i < len && is_alpha(s[*i]))
        (*i)++;
    /* Of the military letters only Z: "T" or "t" here is a stray separator, not -07:00. */
    size_t n = *i - w;
    if (n == 0 || (n == 1 && (s[w] | 0x20) != 'z') || !zone_of(s + w, n, &f->off))
        return false;
    f->has_zone = true;
    /* "UTC+2", "GMT-05:00" */
    if (*i < len && (s[*i] == '+' || s[*i] == '-') && f->off == 0)
        return numeric_zone(s, len, i, &f->off);
    return true;
}

static int parse_iso(const unsigned char *s, size_t len, fields_t *f)
{
    size_t i = 0;
    f->year = fixed(s, len, &i, 4);
    f->mon = f->day = 1;
    bool basic = false;
    if (i == len)
        return 0;
    if (s[i] == '-') {
        /* Month and day of one digit ("2003-6-1") are not ISO but unambiguous. */
        i++;
        if (!digits(s, len, &i, 2, &f->mon))
            return -1;
        if (i == len)
            return 0;
        if (s[i++] != '-' || !digits(s, len, &i, 2, &f->day))
            return -1;
    } else {
        basic = true;
        if ((f->mon = fixed(s, len, &i, 2)) < 0 || (f->day = fixed(s, len, &i, 2)) < 0)
            return -1;
    }
    if (i == len)
        return 0;
    if (s[i] == 'T' || s[i] == 't' || (s[i] == ' ' && !basic))
        i++;
    else
        return -1;
    while (!basic && i < len && s[i] == ' ')
        i++;
    if (basic) {
        if ((f->hour = fixed(s, len, &i, 2)) < 0 || (f->min = fixed(s, len, &i, 2)) < 0)
            return -1;
        if (i < len && is_digit(s[i]) && (f->sec = fixed(s, len, &i, 2)) < 0)
            return -1;
    } else {
        if (digits(s, len, &i, 2, &f->hour) == 0 || i == len || s[i++] != ':' ||
            (f->min = fixed(s, len, &i, 2)) < 0)
            return -1;
        if (i < len && s[i] == ':') {
            i++;
            if ((f->sec = fixed(s, len, &i, 2)) < 0)
                return -1;
        }
    }
    fraction(s, len, &i, &f->ms);
    if (!iso_zone(s, len, &i, f))
        return -1;
    while (i < len && is_space(s[i]))
        i++;
    return i == len ? 0 : -1;
}

/* ---- RFC 822 and relatives -------------------------------------------------------------- */

/* Tokens must be apart (space or ',') except where real dates glue them: "04:00PM",
 * "04:00:00GMT", "04:00:00+0200", "GMT+2", "06-Nov-94", "Tue." / "Jun.". Anything else glued
 * ("Jun10", "2003.5", "+2003-06") is refused rather than guessed at. */
enum { TOK_NONE, TOK_WORD, TOK_NUM, TOK_TIME, TOK_ZONE };

static int parse_rfc(const unsigned char *s, size_t len, fields_t *f)
{
    f->year = f->mon = f->day = f->hour = -1;
    bool have_time = false, ampm = false, alpha_zone = false, numeric = false;
    bool gap = true; /* a separator since the last token */
    int prev = TOK_NONE, year_digits = 0;
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (is_space(c) || c == ',') {
            gap = true;
            i++;
            continue;
        }
        if (c == '(') {
            /* RFC 822 comment, e.g. "-0500 (EST)" */
            const unsigned char *e = memchr(s + i, ')', len - i);
            if (!e)
                return -1;
            i = (size_t)(e - s) + 1;
            gap = true;
            continue;
        }
        if (c == '-' && !have_time) {
            /* "06-Nov-94": only between two date parts */
            if (gap || i + 1 == len || !(prev == TOK_WORD || is_alpha(s[i + 1])) ||
                !(prev == TOK_NUM || is_digit(s[i + 1])))
                return -1;
            gap = true;
            i++;
            continue;
        }
        if (c == '+' || c == '-') {
            /* One numeric zone, after the time; it may refine a "GMT" ("GMT +0100"). */
            if (!have_time || numeric || (f->has_zone && f->off != 0) || !(gap || prev == TOK_TIME))
                return -1;
            numeric = true;
            f->has_zone = true;
            if (!numeric_zone(s, len, &i, &f->off))
                return -1;
            prev = TOK_ZONE;
            gap = false;
            continue;
        }
        if (is_alpha(c)) {
            if (!gap && prev != TOK_TIME)
                return -1;
            size_t w = i;
            while (i < len && is_alpha(s[i]))
                i++;
            size_t n = i - w;
            int m = month_of(s + w, n), off;
            bool date_done = f->day >= 0 && f->mon > 0 && f->year >= 0;
            if (m && f->mon < 0 && gap) {
                f->mon = m;
            } else if (prev == TOK_TIME && !ampm &&
                       (word_is(s + w, n, "am") || word_is(s + w, n, "pm"))) {
                if (f->hour < 1 || f->hour > 12)
                    return -1;
                f->hour = f->hour % 12 + ((s[w] | 0x20) == 'p' ? 12 : 0);
                ampm = true;
            } else if (prev == TOK_NONE && is_day_name(s + w, n)) {
                /* skipped: the date says which day it was */
            } else if (word_is(s + w, n, "etc") && i + 1 < len && s[i] == '/' &&
                       is_alpha(s[i + 1]) && !alpha_zone) {
                i++; /* "Etc/GMT", "Etc/UTC": the tz database's names; the zone word follows */
                gap = true;
                continue;
            } else if ((have_time || (date_done && n > 2)) && !alpha_zone &&
                       zone_of(s + w, n, &off)) {
                alpha_zone = true;
                /* A name after a numeric zone ("+0200 CEST") is a comment on it. */
                if (!f->has_zone) {
                    f->has_zone = true;
                    f->off = off;
                    if (off == 0 && i < len && (s[i] == '+' || s[i] == '-')) {
                        numeric = true; /* "GMT+2" */
                        if (!numeric_zone(s, len, &i, &f->off))
                            return -1;
                    }
                }
            } else {
                return -1;
            }
            if (i < len && s[i] == '.')
                i++; /* "Tue." "Jun." */
            prev = TOK_WORD;
            gap = false;
            continue;
        }
        if (!is_digit(c) || !gap)
            return -1;
        int v, n = digits(s, len, &i, 5, &v);
        if (i < len && is_digit(s[i]))
            return -1;
        if (i < len && s[i] == ':') {
            if (have_time || n > 2)
                return -1;
            f->hour = v;
            i++;
            if ((f->min = fixed(s, len, &i, 2)) < 0)
                return -1;
            if (i < len && s[i] == ':') {
                i++;
                if ((f->sec = fixed(s, len, &i, 2)) < 0)
                    return -1;
                fraction(s, len, &i, &f->ms);
            }
            if (i < len && is_digit(s[i]))
                return -1;
            have_time = true;
            prev = TOK_TIME;
        } else if (n == 4 && i < len && s[i] == '/' && f->year < 0 && f->mon < 0 && f->day < 0) {
            /* "2006/09/15": year first, then month and day, is unambiguous (d/m/y is not) */
            f->year = v;
            year_digits = 4;
            i++;
            if (digits(s, len, &i, 2, &f->mon) < 1 || i >= len || s[i] != '/')
                return -1;
            i++;
            if (digits(s, len, &i, 2, &f->day) < 1 || (i < len && is_digit(s[i])))
                return -1;
            prev = TOK_NUM;
        } else {
            if (f->day < 0 && n <= 2 && f->year < 0) {
                f->day = v;
            } else if (f->year < 0 && n >= 2 && n <= 4) {
                f->year = v;
                year_digits = n;
            } else if (f->day < 0 && n <= 2) {
                f->day = v; /* "2003 Jun 10" */
            } else {
                return -1;
            }
            prev = TOK_NUM;
        }
        gap = false;
    }
    if (f->day < 0 || f->mon < 0 || f->year < 0)
        return -1;
    if (f->hour < 0)
        f->hour = f->min = f->sec = 0;
    /* RFC 2822 §4.3: two-digit years are 1950..2049, three-digit ones count from 1900. */
    if (year_digits == 2)
        f->year += f->year < 50 ? 2000 : 1900;
    else if (year_digits == 3)
        f->year += 1900;
    return 0;
}

/* ---- entry points ----------------------------------------------------------------------- */

int nf_date_parse(const char *str, size_t len, int64_t *out_ms)
{
    const unsigned char *s = (const unsigned char *)str;
    while (len && is_space(s[0])) {
        s++;
        len--;
    }
    while (len && (is_space(s[len - 1]) || s[len - 1] == '\0'))
        len--;
    if (len == 0 || len > 256)
        return -1; /* no date is that long; whatever it is, it is not worth scanning */
    fields_t f = {.hour = 0, .min = 0, .sec = 0, .ms = 0, .off = 0, .has_zone = false};
    /* ISO starts with a four-digit year followed by '-', the end, or (basic format) four more
     * digits and 'T' or the end; "10 Jun 2003" and "2003 Jun 10" go to the RFC side. */
    bool iso = len >= 4 && is_digit(s[0]) && is_digit(s[1]) && is_digit(s[2]) && is_digit(s[3]) &&
               (len == 4 || s[4] == '-' ||
                (len >= 8 && is_digit(s[4]) && is_digit(s[5]) && is_digit(s[6]) && is_digit(s[7]) &&
                 (len == 8 || s[8] == 'T' || s[8] == 't')));
    int rc = iso ? parse_iso(s, len, &f) : parse_rfc(s, len, &f);
    if (rc != 0)
        return -1;
    return to_ms(&f, out_ms);
}

static char *put_digits(char *p, unsigned v, int width)
{
    for (int k = width - 1; k >= 0; k--, v /= 10)
        p[k] = (char)('0' + v % 10);
    return p + width;
}

size_t nf_date_format(int64_t ms, char *buf, size_t buflen)
{
    int64_t days = ms / MS_PER_DAY, rem = ms % MS_PER_DAY;
    if (rem < 0) {
        rem += MS_PER_DAY;
        days--;
    }
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);

    char tmp[40], *p = tmp;
    /* Years outside 0..9999 cannot be RFC 3339; they are written in full with a sign so the
     * output is at least unambiguous. Feeds never get there (the parser stops at 9999). */
    if (y >= 0 && y <= 9999) {
        p = put_digits(p, (unsigned)y, 4);
    } else {
        uint64_t ay = y < 0 ? (uint64_t)(-(y + 1)) + 1 : (uint64_t)y;
        char rev[24];
        int n = 0;
        do {
            rev[n++] = (char)('0' + ay % 10);
            ay /= 10;
        } while (ay);
        *p++ = y < 0 ? '-' : '+';
        while (n)
            *p++ = rev[--n];
    }
    *p++ = '-';
    p = put_digits(p, m, 2);
    *p++ = '-';
    p = put_digits(p, d, 2);
    *p++ = 'T';
    unsigned r = (unsigned)rem;
    p = put_digits(p, r / 3600000, 2);
    *p++ = ':';
    p = put_digits(p, r / 60000 % 60, 2);
    *p++ = ':';
    p = put_digits(p, r / 1000 % 60, 2);
    if (r % 1000) {
        *p++ = '.';
        p = put_digits(p, r % 1000, 3);
    }
    *p++ = 'Z';
    size_t n = (size_t)(p - tmp);
    if (buflen) {
        size_t k = n < buflen ? n : buflen - 1;
        memcpy(buf, tmp, k);
        buf[k] = '\0';
    }
    return n;
}
