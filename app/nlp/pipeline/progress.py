"""One progress bar over the training stages (silent when disabled)."""

from __future__ import annotations

from tqdm import tqdm


class Progress:
    """A tqdm bar with one step per stage; ``note`` names what the running stage does."""

    def __init__(self, enabled: bool, steps: int) -> None:
        self.enabled = enabled
        self.bar = tqdm(total=steps, desc="training", unit="stage", disable=not enabled)

    def step(self, label: str) -> None:
        self.bar.set_postfix_str(label)
        self.bar.update(1)

    def note(self, label: str) -> None:
        self.bar.set_postfix_str(label)

    def close(self) -> None:
        self.bar.close()
