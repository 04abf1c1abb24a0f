"""The visual benchmark: a dataset whose rows carry a picture, sent as an image content part.

``ImageDatasetEnvironment`` is a ``DatasetEnvironment`` whose prompt is the rendered text followed by the row's
image (base64 PNG in the ``image`` field) as a chat-completions ``image_url`` part with a data URL; the model
client turns it into the Responses API's ``input_image`` when that protocol is used. The image is part of the row,
so it is part of the task's identity (``task_id``) and of the data hash, like the text.
"""

from __future__ import annotations

from workbench.environments.base import SeedResult
from workbench.environments.dataset import BenchmarkDefinition, DatasetEnvironment
from workbench.errors import UsageError

IMAGE_FIELD = "image"


class ImageDatasetEnvironment(DatasetEnvironment):
    """Rows with a base64 image in ``image``: the question text, then the picture."""

    mime = "image/png"

    def __init__(self, definition: BenchmarkDefinition) -> None:
        super().__init__(definition)
        _check_rows(self, str(definition.dataset or f"benchmark {definition.name!r}"))

    def seed(self, idx: int) -> SeedResult:
        seed = super().seed(idx)
        image = self.rows[idx].get(IMAGE_FIELD)
        if not isinstance(image, str):
            return seed  # checked at load; kept total so seeding never raises mid-run
        url = f"data:{self.mime};base64,{image}"
        content = [{"type": "text", "text": seed.prompt}, {"type": "image_url", "image_url": {"url": url}}]
        return SeedResult(prompt=seed.prompt, messages=({"role": "user", "content": content},),
                          expected_answer=seed.expected_answer, task_id=seed.task_id, metadata=seed.metadata)

    def describe(self) -> dict[str, object]:
        return {**super().describe(), "modality": "image"}


def _check_rows(env: DatasetEnvironment, where: str) -> None:
    """A row without an image is a data error naming the file and row; an image that does not decode is the
    attempt's ``image_error`` (recorded, the run goes on), so it is not refused here."""
    for i, row in enumerate(env.rows, start=1):
        value = row.get(IMAGE_FIELD)
        if not isinstance(value, str):
            raise UsageError(f"{where}: row {i} has no field {IMAGE_FIELD!r} (a base64 image)")


class ShapeCountEnvironment(ImageDatasetEnvironment):
    """``benchmarks/shape_count``: count the shapes of one colour and form (its toml names this class)."""
