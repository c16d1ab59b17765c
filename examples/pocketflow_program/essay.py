"""A PocketFlow program, written for PocketFlow and nothing else: outline a
short essay, write each section, then put it together. `call_llm` is an
offline stand-in for a model.

    stalwart run examples/pocketflow_program/essay.py "durable agents"

runs it unchanged with every node's work recorded; kill it and run the same
command again to pick up where it stopped. Without a topic it asks for one.
"""

import sys

from pocketflow import BatchNode, Flow, Node


def call_llm(prompt):
    topic = prompt.rsplit(":", 1)[-1].strip()
    if prompt.startswith("Outline"):
        return [f"What {topic} are", f"Why {topic} matter", f"How to start with {topic}"]
    return f"{topic}: a paragraph that a model would write."


class AskTopic(Node):
    def prep(self, shared):
        return shared.get("topic")

    def exec(self, topic):
        return topic or input("Topic: ")

    def post(self, shared, prep_res, exec_res):
        shared["topic"] = exec_res


class Outline(Node):
    def prep(self, shared):
        return shared["topic"]

    def exec(self, topic):
        return call_llm(f"Outline an essay about: {topic}")

    def post(self, shared, prep_res, exec_res):
        shared["outline"] = exec_res


class WriteSections(BatchNode):
    def prep(self, shared):
        return shared["outline"]

    def exec(self, heading):
        return heading, call_llm(f"Write the section: {heading}")

    def post(self, shared, prep_res, exec_res):
        shared["sections"] = dict(exec_res)


class Assemble(Node):
    def prep(self, shared):
        return shared["topic"], shared["sections"]

    def exec(self, inputs):
        topic, sections = inputs
        body = "\n\n".join(f"## {h}\n{text}" for h, text in sections.items())
        return f"# {topic.capitalize()}\n\n{body}"

    def post(self, shared, prep_res, exec_res):
        shared["essay"] = exec_res


def main():
    ask = AskTopic()
    ask >> Outline() >> WriteSections() >> Assemble()
    shared = {"topic": " ".join(sys.argv[1:])}
    Flow(start=ask).run(shared)
    print(shared["essay"])


if __name__ == "__main__":
    main()
