"""``python -m pos_geometry``: the ``pos-geometry`` command."""

from pos_geometry.cli import main

if __name__ == "__main__":
    main()
