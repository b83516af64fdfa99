"""Make the checkout importable as ``ansible_collections.cloudstack.cks`` for every test."""

import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
COLLECTIONS = os.path.join(ROOT, ".venv", "collections")
_link = os.path.join(COLLECTIONS, "ansible_collections", "cloudstack", "cks")
if not os.path.islink(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    try:
        os.symlink(ROOT, _link)
    except FileExistsError:  # another pytest worker made it first
        pass
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", COLLECTIONS)
sys.path.insert(0, os.path.join(ROOT, "tests", "sim"))
# The tests' own helpers shared across their folders (headless_chromium.py).
sys.path.append(os.path.join(ROOT, "tests"))
