# args: run 1f1b --pp 2 -m 2 --steps 1 --model model_no_context:build
"""`build` takes no argument: the model context never reaches it."""


def build():
    return None
