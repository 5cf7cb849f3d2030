"""No defect: the receiver as ``docs/contract.md`` describes it. The suite must pass it."""

from _receiver_base import Receiver, serve

make = Receiver

if __name__ == "__main__":
    serve(make)
