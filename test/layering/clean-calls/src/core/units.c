int units_count(void);

int
units_count(void)
{
	return 1;
}
