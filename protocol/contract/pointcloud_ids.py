"""Command ids of the point-cloud preprocessing operators (0x0600-0x06ff of the NN range)."""
ENCODE = 0x0600      # stage 1: packed cell index and quantised features per point
TRANSPOSE = 0x0601   # stage 2: pillar-major voxels -> the model's layout
