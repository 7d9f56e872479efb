import os

# The harness tests build models: one thread, whatever the machine offers.
os.environ.setdefault("OMP_NUM_THREADS", "1")
