"""One run folder analysed out of core: `analyse_folder`, the summary model and the tables written beside it."""
