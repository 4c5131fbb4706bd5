/* core/ calls a function of engine/, a folder above it */
int apply_all(void);
int units_count(void);

int
units_count(void)
{
	return apply_all();
}
