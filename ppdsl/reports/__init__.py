"""What a checked schedule looks like: simulation records, Chrome traces, pictures, comparisons, calibration,
and the text formats (JSON, CSV, PyTorch's CSV). Imports `ppdsl.analysis` and below."""
