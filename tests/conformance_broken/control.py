"""No defect: the base server as is. The conformance suite must pass it."""

from _base import build, serve

if __name__ == "__main__":
    serve(*build())
