"""A progress bar on stderr: tqdm when it is installed, else a small one of our own."""
import sys


class _PlainBar:
    """Redraws one line on a terminal; elsewhere (CI logs) prints one line per new description."""

    def __init__(self, total, stream=sys.stderr, width=30):
        self.total, self.n, self.stream, self.width = total, 0, stream, width
        self.tty = stream.isatty()
        self.desc = ""

    def set_description(self, desc):
        if not self.tty and desc.split(":")[0] != self.desc.split(":")[0]:
            self.stream.write(f"[{self.n}/{self.total}] {desc}\n")
            self.stream.flush()
        self.desc = desc
        self._draw()

    def update(self, n=1):
        self.n += n
        self._draw()

    def _draw(self):
        if not self.tty:
            return
        done = int(self.width * self.n / max(self.total, 1))
        self.stream.write(f"\r[{'#' * done}{'.' * (self.width - done)}] {self.n}/{self.total} {self.desc:<40.40}")
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write("\r" + " " * (self.width + 60) + "\r")
            self.stream.flush()


class _NoBar:
    def set_description(self, desc):
        pass

    def update(self, n=1):
        pass

    def close(self):
        pass


def progress_bar(total, enabled=True):
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainBar(total)
    return tqdm(total=total, file=sys.stderr, leave=False, dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]")
