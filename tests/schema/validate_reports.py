"""Validates every JSON golden that is a report against docs/report.schema.json.

usage: validate_reports.py SCHEMA GOLDEN_DIR

A JSON golden is a report unless it is one of the other formats' (the Chrome trace's
displayTimeUnit, OTLP's resourceSpans/resourceLogs); every report must validate. The
schema itself is checked first, and a report without its summary must be refused (the
validator is live, not a formality).
"""
import copy
import json
import pathlib
import sys

import jsonschema

OTHER_FORMATS = ("displayTimeUnit", "resourceSpans", "resourceLogs", "traceEvents")


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
        failed += bool(errors)
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
