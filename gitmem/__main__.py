from . import unshadow

unshadow()

from .cli import main  # noqa: E402

main(prog_name="gitmem")
