"""A PocketFlow program whose nodes pass a table and a picture: load readings
into a pandas DataFrame, draw them as a small PIL image, and caption it.
Written for PocketFlow and nothing else.

    stalwart run examples/pocketflow_program/chart.py --codec pandas --codec pil

runs it unchanged with the DataFrame and the image recorded by their codecs;
kill it and run the same command again to pick up where it stopped.
"""

import sys

import pandas as pd
from PIL import Image
from pocketflow import Flow, Node

READINGS = {"Oslo": 3.5, "Lima": 19.0, "Cairo": 24.5, "Quito": 14.0}


class Load(Node):
    def prep(self, shared):
        return shared["cities"]

    def exec(self, cities):
        return pd.DataFrame({"city": cities, "temp": [READINGS[c] for c in cities]})

    def post(self, shared, prep_res, exec_res):
        shared["table"] = exec_res


class Draw(Node):
    def prep(self, shared):
        return shared["table"]

    def exec(self, table):
        # One column of pixels per city, as tall as its temperature.
        img = Image.new("L", (len(table), 25), 0)
        for x, temp in enumerate(table["temp"]):
            for y in range(int(temp)):
                img.putpixel((x, 24 - y), 255)
        return img

    def post(self, shared, prep_res, exec_res):
        shared["chart"] = exec_res


class Caption(Node):
    def prep(self, shared):
        return shared["table"], shared["chart"]

    def exec(self, inputs):
        table, chart = inputs
        warmest = table.loc[table["temp"].idxmax(), "city"]
        lit = sum(1 for value in chart.tobytes() if value)
        return f"{len(table)} cities, warmest {warmest}; {chart.size[0]}x{chart.size[1]}, {lit} lit"

    def post(self, shared, prep_res, exec_res):
        shared["caption"] = exec_res


load = Load()
load >> Draw() >> Caption()
shared = {"cities": sys.argv[1:] or sorted(READINGS)}
Flow(start=load).run(shared)
print(shared["caption"])
