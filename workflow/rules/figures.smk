# One rule per figure; each reads only tables and saved tensors.
