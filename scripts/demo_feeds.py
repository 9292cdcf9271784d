#!/usr/bin/env python3
"""demo_feeds.py SRC DST — the bundled example feeds, dated as of now, for scripts/run.sh.

The feeds in examples/feeds/ carry fixed dates (November 2026). The query API's feed ranks the
articles of the last 48 hours (docs/ARCHITECTURE.md §4), so a demo run days later would show readers
no recent article of their topics, only trending. This copies every file of SRC to DST with each
date in it (RFC 822 as in RSS's <pubDate>, RFC 3339 as in Atom and JSON Feed) moved forward by
the same whole number of hours, so that the newest one lies in the last hour and none in the
future. The zones and the spacing of the dates stay as written; weekdays follow the new dates.
Files are replaced only when their text changes, through a rename (a job reading them never
sees half a file). Article ids come from the items' URLs, so a shifted copy names the same
articles as the original, run after run.

Exit 0, or 2 with a message when SRC has no file or no date."""
import datetime as dt
import email.utils
import os
import re
import sys

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
RFC822 = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{1,2}) (%s) (\d{4}) "
                    r"(\d\d):(\d\d):(\d\d) ([A-Z]{1,4}|[+-]\d{4})\b" % "|".join(MONTHS))
RFC3339 = re.compile(r"\b(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)")


def rfc822_utc(m):
    t = email.utils.parsedate_tz(m.group(0))
    if t is None:
        return None
    return email.utils.mktime_tz(t)


def rfc3339_utc(m):
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    z = m.group(8)
    off = 0 if z == "Z" else (1 if z[0] == "+" else -1) * (int(z[1:3]) * 3600 + int(z[4:6]) * 60)
    local = dt.datetime(y, mo, d, h, mi, s, tzinfo=dt.timezone.utc)
    return local.timestamp() - off


def shift_rfc822(m, hours):
    local = dt.datetime(int(m.group(3)), MONTHS.index(m.group(2)) + 1, int(m.group(1)),
                        int(m.group(4)), int(m.group(5)), int(m.group(6))) + dt.timedelta(hours=hours)
    return "%s, %02d %s %04d %02d:%02d:%02d %s" % (
        DAYS[local.weekday()], local.day, MONTHS[local.month - 1], local.year, local.hour,
        local.minute, local.second, m.group(7))


def shift_rfc3339(m, hours):
    local = dt.datetime(*(int(m.group(i)) for i in range(1, 7))) + dt.timedelta(hours=hours)
    return local.strftime("%Y-%m-%dT%H:%M:%S") + (m.group(7) or "") + m.group(8)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = sys.argv[1:]
    names = sorted(n for n in os.listdir(src) if os.path.isfile(os.path.join(src, n)))
    if not names:
        print("demo_feeds.py: no file in %s" % src, file=sys.stderr)
        return 2
    texts = {n: open(os.path.join(src, n), encoding="utf-8").read() for n in names}
    newest = None
    for text in texts.values():
        for pat, utc in ((RFC822, rfc822_utc), (RFC3339, rfc3339_utc)):
            for m in pat.finditer(text):
                t = utc(m)
                if t is not None and (newest is None or t > newest):
                    newest = t
    if newest is None:
        print("demo_feeds.py: no date in the files of %s" % src, file=sys.stderr)
        return 2
    hours = max(0, int((dt.datetime.now(dt.timezone.utc).timestamp() - newest) // 3600))
    os.makedirs(dst, exist_ok=True)
    for n, text in texts.items():
        text = RFC822.sub(lambda m: shift_rfc822(m, hours), text)
        text = RFC3339.sub(lambda m: shift_rfc3339(m, hours), text)
        path = os.path.join(dst, n)
        try:
            if open(path, encoding="utf-8").read() == text:
                continue
        except OSError:
            pass
        tmp = "%s.tmp%d" % (path, os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    print("demo_feeds.py: %d files in %s, dates moved %d hours forward" % (len(names), dst, hours),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
