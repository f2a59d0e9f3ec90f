"""Set-up shared by the project's tests."""

# Import order matters within one process with these pins: once TensorFlow 2.21 is imported, importing
# triton (which torch._dynamo, torchvision.ops and torchvision.models import) crashes the interpreter with
# a segmentation fault; the other order works. tests/test_module_05.py imports TensorFlow when it is
# collected, so triton comes first here. (Graders run each check in its own process, so they never mix.)
import torchvision.ops  # noqa: F401
