int apply_all(void);
int drive(void);

int
drive(void)
{
	return apply_all();
}
