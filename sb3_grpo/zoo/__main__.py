"""``python -m sb3_grpo.zoo train|enjoy|... [rl_zoo3 flags]``: the same as the ``sb3-grpo-zoo`` command."""

from sb3_grpo.zoo.cli import main

if __name__ == "__main__":
    main()
