"""Data: the paper's data sets under one root with offline sources, OOD sets, the paper's
manipulations (subsampling, square masking, input perturbation), the 2-D spiral toy, and the
engine's container :class:`~gped_kit.data.container.GPEDData` for any tensors or datasets."""
