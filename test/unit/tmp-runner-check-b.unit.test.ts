throw new Error('broken import');
