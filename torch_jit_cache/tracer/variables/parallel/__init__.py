"""torch.distributed in the trace: collectives as functional-collective nodes (distributed.py) and
FSDP2 blocks whose parameters are all-gathered in the graph (fsdp2.py).
"""
