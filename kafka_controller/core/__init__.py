"""Pure, deterministic controller logic over ControllerContext: no I/O except through ports."""
