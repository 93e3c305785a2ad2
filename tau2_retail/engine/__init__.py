"""One scenario end to end: prompts, the conversation loop, the judge, the signals."""
