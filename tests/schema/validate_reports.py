"""Validates every JSON golden that is a report against docs/report.schema.json.

usage: validate_reports.py SCHEMA GOLDEN_DIR

A JSON golden is a report unless it is one of the other formats' (the Chrome trace's
displayTimeUnit, OTLP's resourceSpans/resourceLogs); every report must validate. The
schema itself is checked first, and a report without its summary must be refused (the
validator is live, not a formality). Every finding's message must be the paragraph
composed from its headline, details and fixes (collector/analysis/finding_builder.h).
"""
import copy
import json
import pathlib
import sys

import jsonschema

OTHER_FORMATS = ("displayTimeUnit", "resourceSpans", "resourceLogs", "traceEvents")


def composed(finding):
    """The message FindingBuilder composes: "<headline>. <label>: <text>. ... Fix: <text>."."""
    m = finding["headline"] + "."
    for d in finding["details"]:
        m += f" {d['label']}: {d['text']}."
    for x in finding["fixes"]:
        m += f" Fix: {x['text']}."
    return m


def main():
    schema = json.loads(pathlib.Path(sys.argv[1]).read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    reports = []
    for path in sorted(pathlib.Path(sys.argv[2]).glob("*.json")):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and any(k in doc for k in OTHER_FORMATS):
            continue
        reports.append((path.name, doc))
    failed = 0
    for name, doc in reports:
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        for e in errors[:5]:
            where = "/".join(str(p) for p in e.absolute_path) or "(top)"
            print(f"{name}: {where}: {e.message}")
        wrong = [f for f in doc.get("findings", []) if f.get("message") != composed(f)]
        for f in wrong[:2]:
            print(f"{name}: a {f['kind']} finding's message is not composed from its headline, "
                  f"details and fixes: {f['message'][:120]}")
        failed += bool(errors) or bool(wrong)
    if not reports:
        print("no JSON report goldens found")
        return 1
    broken = copy.deepcopy(reports[0][1])
    broken.pop("summary", None)
    if validator.is_valid(broken):
        print(f"{reports[0][0]} without its summary validates: the schema checks nothing")
        return 1
    print(f"{len(reports) - failed} of {len(reports)} JSON reports valid")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
