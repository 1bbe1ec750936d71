"""The CV operator catalog (command ids 0x0800-0x0fff), OpenCV kernels on shared-memory images.

``register(registry)`` binds a kernel to every entry of ``protocol.contract.cv_ops``; see
docs/cv.md. Submodules are imported on registration only, so importing this package needs
no OpenCV.
"""


def register(registry) -> None:
    """Register every CV operator. Raises ValueError on an id clash (registry)."""
    from dsp_side.operators.cv import color, features, filters, geometry, intensity, morphology
    opencv_ops = registry.defaults(inputs_writable=True)  # OpenCV copies read-only arrays
    for module in (filters, morphology, features, intensity, color, geometry):
        module.register(opencv_ops)
