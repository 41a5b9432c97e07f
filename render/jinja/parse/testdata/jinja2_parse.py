#!/usr/bin/env python3
"""Parses templates with the real Jinja2 (the default Environment, with the loopcontrols and do
extensions the engine also accepts), without rendering them.

Input on stdin: a JSON list of template sources.
Output on stdout: {"version": Jinja2's, "results": one a template: {} when it parses, else
{"err": message, "type": class, "line": the line Jinja2 reports (0: none)}}.
"""
import json
import sys

import jinja2


def main():
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])
    results = []
    for src in json.load(sys.stdin):
        try:
            env.parse(src)
            results.append({})
        except Exception as e:  # noqa: BLE001 - any error is a result to compare
            results.append({"err": str(e), "type": type(e).__name__, "line": getattr(e, "lineno", None) or 0})
    json.dump({"version": jinja2.__version__, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
