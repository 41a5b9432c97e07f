#!/usr/bin/env python3
"""Checks that the "want" of every case marked "jinja2": true is what real Jinja2 renders.

    cd render/testdata/jinja2 && python3 check.py
"""
import json, re, sys, jinja2

class D(dict):
    def itervalues(self): return iter(self.values())
    def iteritems(self): return iter(self.items())
    def iterkeys(self): return iter(self.keys())

ctx = json.load(open("context.json"), object_pairs_hook=lambda p: D(sorted(p)))
env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
env.filters["re_escape"] = re.escape
failed = 0
for case in json.load(open("cases.json")):
    if not case["jinja2"]:
        continue
    got = env.from_string(case["tpl"]).render(**ctx)
    if got != case["want"]:
        failed += 1
        print(f"{case['name']}:\n  want {case['want']!r}\n  got  {got!r}")
print("ok" if not failed else f"{failed} failed")
sys.exit(1 if failed else 0)
