"""From a document to a result: load the model, build the prompt (templates in `prompts/`), run
the loop, turn tokens back into text."""
