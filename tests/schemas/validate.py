#!/usr/bin/env python3
"""Validates JSON-lines records against the topic schemas in schemas/ (JSON Schema 2020-12).

    validate.py [--topic T] [--schemas DIR] [--expect-invalid] FILE...

Without --topic every line is a record in the sink format (src/io/sink.h),
    {"topic": "articles", "key": "...", "value": {...}}
whose value is validated against schemas/<topic>.schema.json; its key must be a string and,
when the schema names the key ("x-kafka-key": a str.format template over the value, such as
"{article_id}"), equal to it. A null value is allowed only where the schema says
"x-tombstone": true. With --topic T every line is a bare value of topic T. FILE may be "-"
(stdin); blank lines are skipped. Formats are checked (date-time needs rfc3339-validator,
which python3-jsonschema brings).

Exit 0 when every record is valid, 1 listing each failure as FILE:LINE: ..., 2 on usage
errors (unknown topic, unreadable file, a schema that is not itself valid).
With --expect-invalid the sense is reversed: every record must be rejected, and the ones that
validate are the failures (for the bad examples in schemas/examples/).
"""

import argparse
import json
import os
import sys

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMAS = os.path.normpath(os.path.join(HERE, "..", "..", "schemas"))


class Schemas:
    def __init__(self, directory):
        self.directory = directory
        self.cache = {}

    def get(self, topic):
        """(schema, validator) for topic, or None if there is no schema of that name."""
        if topic in self.cache:
            return self.cache[topic]
        path = os.path.join(self.directory, f"{topic}.schema.json")
        if not isinstance(topic, str) or "/" in topic or not os.path.isfile(path):
            self.cache[topic] = None
            return None
        with open(path, encoding="utf-8") as f:
            schema = json.load(f)
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as e:
            sys.exit(f"validate.py: {path}: not a valid JSON Schema: {e.message}")
        v = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        self.cache[topic] = (schema, v)
        return self.cache[topic]


def where(error):
    path = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".") or "(value)"


def check_value(schemas, topic, value, key, sink_format):
    """A list of problems (strings); empty when the record is valid."""
    found = schemas.get(topic)
    if found is None:
        return [f"no schema for topic {topic!r} in {schemas.directory}"]
    schema, validator = found
    problems = []
    if value is None:
        if not schema.get("x-tombstone"):
            problems.append(f"{topic}: null value, but {topic} has no tombstones")
    else:
        for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
            problems.append(f"{topic}: {where(e)}: {e.message}")
    if sink_format:
        if not isinstance(key, str):
            problems.append(f"{topic}: key is {json.dumps(key)}, expected a string")
        elif value is not None and not problems and schema.get("x-kafka-key"):
            try:
                want = schema["x-kafka-key"].format(**value)
            except (KeyError, IndexError, TypeError):
                want = None
            if want != key:
                problems.append(f"{topic}: key {key!r} does not match the value ({want!r})")
    return problems


def records(name):
    f = sys.stdin if name == "-" else open(name, encoding="utf-8", errors="surrogateescape")
    try:
        for n, line in enumerate(f, 1):
            if line.strip():
                yield n, line
    finally:
        if f is not sys.stdin:
            f.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topic", help="lines are bare values of this topic")
    ap.add_argument("--schemas", default=DEFAULT_SCHEMAS, help="schema directory")
    ap.add_argument("--expect-invalid", action="store_true",
                    help="every record must be rejected")
    ap.add_argument("files", nargs="+", metavar="FILE")
    a = ap.parse_args()
    schemas = Schemas(a.schemas)
    if a.topic is not None and schemas.get(a.topic) is None:
        print(f"validate.py: no schema for topic {a.topic!r} in {a.schemas}", file=sys.stderr)
        return 2

    total = failed = 0
    for name in a.files:
        try:
            lines = list(records(name))
        except OSError as e:
            print(f"validate.py: {name}: {e.strerror}", file=sys.stderr)
            return 2
        for n, line in lines:
            total += 1
            try:
                rec = json.loads(line)
            except ValueError as e:
                problems = [f"not JSON: {e}"]
            else:
                if a.topic is not None:
                    problems = check_value(schemas, a.topic, rec, None, False)
                elif (not isinstance(rec, dict) or set(rec) != {"topic", "key", "value"}
                      or not isinstance(rec["topic"], str)):
                    problems = ['expected a sink record {"topic": ..., "key": ..., "value": ...}'
                                " (or use --topic)"]
                else:
                    problems = check_value(schemas, rec["topic"], rec["value"], rec["key"], True)
            if a.expect_invalid:
                if not problems:
                    failed += 1
                    print(f"{name}:{n}: valid, but expected to be rejected")
            elif problems:
                failed += 1
                for p in problems:
                    print(f"{name}:{n}: {p}")
    print(f"validate.py: {total} records, {failed} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
