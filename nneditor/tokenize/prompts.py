"""Sample prompts offered when preparing text inputs (any text can be typed instead)."""

SAMPLE_PROMPTS = (
    "The capital of France is",
    "Once upon a time, there was a",
    "def fibonacci(n):",
    "Translate to French: Good morning, how are you?",
    "Question: What is 12 times 7? Answer:",
    "The quick brown fox jumps over the lazy dog.",
    "北京是中国的首都，",
    "<|im_start|>user\nWhat is the tallest mountain on Earth?<|im_end|>\n<|im_start|>assistant\n",
)
