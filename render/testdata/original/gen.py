#!/usr/bin/env python3
"""Generates the *.golden files with the real Jinja2 (3.x), as the original project rendered
them: dicts iterate in sorted key order (what the Go renderer guarantees), Python 2's
itervalues() is provided, and re_escape is re.escape.

    cd render/testdata/original && python3 gen.py
"""
import json, re, sys, yaml, jinja2

class D(dict):
    def itervalues(self): return iter(self.values())
    def iteritems(self): return iter(self.items())
    def iterkeys(self): return iter(self.keys())

snap = json.load(open("snapshot.json"), object_pairs_hook=lambda p: D(sorted(p)))
env = jinja2.Environment()
env.filters["re_escape"] = re.escape
for name in ["basic", "ssl", "varnish"]:
    doc = yaml.safe_load(open(f"../../../../shared/reference/original-examples/{name}.yaml"))
    for key in ["template", "varnishtemplate"]:
        if key not in doc["data"]:
            continue
        out = env.from_string(doc["data"][key]).render(**snap)
        with open(f"{name}.{key}.golden", "w") as f:
            f.write(out)
