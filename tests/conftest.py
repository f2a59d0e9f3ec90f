"""Set-up shared by the project's tests."""

# Import order matters within one process with these pins: once TensorFlow 2.21 is imported, importing
# triton (which torch._dynamo, torchvision.ops and torchvision.models import) crashes the interpreter with
# a segmentation fault; the other order works. tests/test_module_05.py imports TensorFlow when it is
# collected, so triton comes first here. (Graders run each check in its own process, so they never mix.)
import torchvision.ops  # noqa: F401

import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from grader import catalog  # noqa: E402
from grader.learner_copy import hand_out_for_testing  # noqa: E402
from grader.conftest import s3_server  # noqa: E402,F401  (module 10's server: the fixture below asks for it)

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def headless_browser(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """Open a static page in a real headless Chromium: `open_page(page, screenshot=None, width=1280, height=1000,
    pdf=None)` returns the page's DOM after its scripts ran, and writes a PNG screenshot and a printed PDF where
    asked. Skips, saying why,
    where no Chromium is installed (Debian: `apt-get install chromium`)."""
    browser = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    if browser is None:
        pytest.skip(f"no headless browser ({', '.join(BROWSERS)}) on PATH; Debian: apt-get install chromium")
    profile = tmp_path_factory.mktemp("chromium-profile")

    def open_page(page: Path, screenshot: Path | None = None, width: int = 1280, height: int = 1000,
                  pdf: Path | None = None) -> str:
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                   "--hide-scrollbars", "--no-first-run", f"--user-data-dir={profile}",
                   f"--window-size={width},{height}"]
        done = subprocess.run(command + ["--dump-dom", page.resolve().as_uri()], capture_output=True, text=True,
                              timeout=BROWSER_TIMEOUT_S)
        assert done.returncode == 0 and done.stdout, f"{browser} could not open {page}: {done.stderr[-2000:]}"
        if screenshot is not None:
            shot = subprocess.run(command + [f"--screenshot={screenshot.resolve()}", page.resolve().as_uri()],
                                  capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)
            assert shot.returncode == 0 and screenshot.is_file(), f"no screenshot of {page}: {shot.stderr[-2000:]}"
        if pdf is not None:  # printed as the browser prints it (the page's own @page size), without header or footer
            printed = subprocess.run(command + ["--no-pdf-header-footer", f"--print-to-pdf={pdf.resolve()}",
                                                page.resolve().as_uri()], capture_output=True, text=True,
                                     timeout=BROWSER_TIMEOUT_S)
            assert printed.returncode == 0 and pdf.is_file(), f"{page} did not print: {printed.stderr[-2000:]}"
        return done.stdout

    return open_page


@pytest.fixture(scope="session")
def hand_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A learner's copy (`make learner-copy`) and the environment in which only it is importable. `make test` makes
    one before its first phase and names it in LOADERLAB_HANDOUT; alone, this makes its own."""
    given = os.environ.get("LOADERLAB_HANDOUT")
    dest = Path(given) if given else tmp_path_factory.mktemp("handout") / "course"
    return dest, hand_out_for_testing(dest, reuse=bool(given))


# The exercises whose checks read from module 10's S3 server, as their grader files declare it (`usefixtures("s3_server")`).
S3_EXERCISES = tuple(exercise.short for exercise in catalog.exercises() if exercise.needs_storage)


@pytest.fixture(autouse=True)
def s3_server_for_graded_storage_exercises(request: pytest.FixtureRequest) -> None:
    """A test parametrized with one of S3_EXERCISES (a planted folder, an alternative, an exercise's name) grades its
    checks in processes that need the S3 server: the session's is started on first need and announced to them."""
    callspec = getattr(request.node, "callspec", None)
    if callspec and any(str(value).startswith(S3_EXERCISES) for value in callspec.params.values()):
        request.getfixturevalue("s3_server")
