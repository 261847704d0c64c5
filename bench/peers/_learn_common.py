"""What the learn peers share: their command line (arrays in, rows out)."""
import argparse


def peer_args():
    """--data (an .npz of arrays), --out (JSON rows), --trials, --epsilons."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--epsilons", default="0.1,1")
    return ap.parse_args()
