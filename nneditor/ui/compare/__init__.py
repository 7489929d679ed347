"""Two models side by side: which blocks match (:mod:`.alignment`, Qt-free), where they go
(:mod:`.side_layout`, Qt-free), the two synchronised canvases (:mod:`.canvas`) with their marks
(:mod:`.marks`), the chosen block's weight pairs (:mod:`.details`), and one pair as A, B and
A − B (:mod:`.tensors`). :mod:`.comparison` holds what the window's compare job returns."""
