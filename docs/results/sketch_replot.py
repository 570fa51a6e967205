"""Redraw a sketch sweep's plot from its summary.csv: python replot.py SUMMARY.csv OUT.png TITLE KEY [SERIES_KEY]"""

import csv
import sys

from marketplace.protocols.sketch.sweeps import plot_sweep


def value(text):
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return text


summary = [{k: value(v) for k, v in row.items()} for row in csv.DictReader(open(sys.argv[1]))]
plot_sweep(summary, sys.argv[4:], sys.argv[2], title=sys.argv[3])
